// The Key Vault of the app's two keys, Audit__ChainKey and Auth__SigningKey. The template creates
// no secret: infra/hooks/postprovision.sh generates each once (`azurebank keys generate`) and
// stores it, so no key is ever in a parameter, an output or the deployment's history. RBAC only;
// soft delete with purge protection, since a lost chain key leaves the audit chain unverifiable.
param name string
param location string
param tags object
param appPrincipalId string
param deployerPrincipalId string
@allowed([
  'User'
  'ServicePrincipal'
])
param deployerPrincipalType string

var secretsUser = '4633458b-17de-408a-b874-0445c86b69e6'
var secretsOfficer = 'b86a8fe4-44ce-4948-aee5-eccb2c155cd7'

resource keyVault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  // checkov:skip=CKV_AZURE_189: public network access stays on for the same reason as CKV_AZURE_109: the hook and rotation reach the vault from outside Azure, with an Entra token and the Secrets Officer role
  // checkov:skip=CKV_AZURE_109: the vault admits every network because its clients are the app (through its identity) and the deployer's hook and key rotation from an operator's machine; each needs an Entra token and its RBAC role, and no access policy or key exists
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: subscription().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: 90
    enablePurgeProtection: true
    enabledForDeployment: false
    enabledForDiskEncryption: false
    enabledForTemplateDeployment: false
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }
}

resource appReadsSecrets 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(keyVault.id, appPrincipalId, secretsUser)
  scope: keyVault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', secretsUser)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource deployerWritesSecrets 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(keyVault.id, deployerPrincipalId, secretsOfficer)
  scope: keyVault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', secretsOfficer)
    principalId: deployerPrincipalId
    principalType: deployerPrincipalType
  }
}

output name string = keyVault.name
output uri string = keyVault.properties.vaultUri
