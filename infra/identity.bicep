// The app's one identity: a user-assigned managed identity. Every resource grants it its own
// least role (storage.bicep, vault.bicep, monitoring.bicep), and the database user is granted by
// `azurebank db grant` (infra/hooks/postprovision.sh), never by the template.
param name string
param location string
param tags object

resource appIdentity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: name
  location: location
  tags: tags
}

output id string = appIdentity.id
output name string = appIdentity.name
output clientId string = appIdentity.properties.clientId
output principalId string = appIdentity.properties.principalId
