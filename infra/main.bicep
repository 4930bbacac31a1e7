// `azd up` provisions this: one resource group holding the Flex Consumption Function App, its
// identity, storage, network, Azure SQL, Key Vault and monitoring (docs/deploy.md). Every
// resource is declared directly in the modules of this folder (no registry modules), so checkov
// scans each one offline.
targetScope = 'subscription'

@minLength(1)
@maxLength(48)
@description('The azd environment\'s name: it names the resource group and seeds every name.')
param environmentName string

@minLength(1)
@description('The region of every resource (one that offers Flex Consumption).')
param location string

@description('The deployer\'s Entra object id (azd: AZURE_PRINCIPAL_ID): the SQL server\'s Entra admin, and Key Vault Secrets Officer so the hook can store the keys.')
param principalId string

@allowed([
  'User'
  'ServicePrincipal'
])
param principalType string = 'User'

@description('The name shown for the SQL server\'s Entra admin (the deployer).')
param principalName string = 'azurebank-deployer'

@description('Azure SQL serverless, General Purpose: 1, 2 or 4 vCores.')
@allowed([
  'GP_S_Gen5_1'
  'GP_S_Gen5_2'
  'GP_S_Gen5_4'
])
param databaseSku string = 'GP_S_Gen5_2'

@description('Database__PoolSize: the connections each instance keeps open.')
@minValue(1)
param databasePoolSize int = 2

@description('Database__MaxOverflow: the connections each instance may open beyond the pool.')
@minValue(0)
param databaseMaxOverflow int = 1

@description('The database workers kept for everything but the app: the deployer, migrations, the .NET API, an operator\'s azurebank.')
@minValue(0)
param databaseReservedWorkers int = 20

@description('Notices__Runner: None (nobody delivers) until an operator names the Function, after the runbook of docs/operations.md.')
@allowed([
  'None'
  'Api'
  'Function'
])
param noticesRunner string = 'None'

@description('Notices__Contact, which every notice names; blank until an operator sets it.')
param noticesContact string = ''

@description('ApiDocs__Enabled: the API page and /api/openapi.json (azurebank smoke reads the document).')
param apiDocsEnabled bool = true

var tags = {
  'azd-env-name': environmentName
}
var token = toLower(uniqueString(subscription().id, environmentName, location))
var appName = 'func-azurebank-${token}'
// Azure SQL serverless workers per vCore count (the tier's concurrent-request limit).
var databaseWorkers = {
  GP_S_Gen5_1: 75
  GP_S_Gen5_2: 150
  GP_S_Gen5_4: 300
}
var connectionsPerInstance = databasePoolSize + databaseMaxOverflow
// docs/deploy.md: instances x (PoolSize + MaxOverflow) <= workers - reserved.
var maximumInstanceCount = min(1000, (databaseWorkers[databaseSku] - databaseReservedWorkers) / connectionsPerInstance)

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: 'rg-${environmentName}'
  location: location
  tags: tags
}

module identity 'identity.bicep' = {
  name: 'identity'
  scope: rg
  params: {
    name: 'id-azurebank-${token}'
    location: location
    tags: tags
  }
}

module network 'network.bicep' = {
  name: 'network'
  scope: rg
  params: {
    name: 'vnet-azurebank-${token}'
    location: location
    tags: tags
  }
}

module monitoring 'monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    logAnalyticsName: 'log-azurebank-${token}'
    applicationInsightsName: 'appi-azurebank-${token}'
    location: location
    tags: tags
    appPrincipalId: identity.outputs.principalId
  }
}

module storage 'storage.bicep' = {
  name: 'storage'
  scope: rg
  params: {
    hostAccountName: 'stfn${token}'
    noticesAccountName: 'stnt${token}'
    deploymentContainerName: 'app-package'
    noticesContainerName: 'notices'
    location: location
    tags: tags
    appPrincipalId: identity.outputs.principalId
    appSubnetId: network.outputs.appSubnetId
  }
}

module vault 'vault.bicep' = {
  name: 'vault'
  scope: rg
  params: {
    name: 'kv-ab-${token}'
    location: location
    tags: tags
    appPrincipalId: identity.outputs.principalId
    deployerPrincipalId: principalId
    deployerPrincipalType: principalType
  }
}

module database 'database.bicep' = {
  name: 'database'
  scope: rg
  params: {
    serverName: 'sql-azurebank-${token}'
    databaseName: 'azurebank'
    location: location
    tags: tags
    deployerPrincipalId: principalId
    deployerName: principalName
    deployerPrincipalType: principalType
    skuName: databaseSku
    appSubnetId: network.outputs.appSubnetId
    logAnalyticsId: monitoring.outputs.logAnalyticsId
  }
}

module app 'app.bicep' = {
  name: 'app'
  scope: rg
  params: {
    name: appName
    planName: 'plan-azurebank-${token}'
    location: location
    tags: tags
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    appSubnetId: network.outputs.appSubnetId
    hostBlobEndpoint: storage.outputs.hostBlobEndpoint
    deploymentContainerUrl: storage.outputs.deploymentContainerUrl
    noticesBlobEndpoint: storage.outputs.noticesBlobEndpoint
    noticesContainerName: 'notices'
    applicationInsightsConnectionString: monitoring.outputs.connectionString
    vaultUri: vault.outputs.uri
    sqlServerFqdn: database.outputs.fullyQualifiedDomainName
    databaseName: database.outputs.databaseName
    hostId: 'azurebank-${token}'
    databasePoolSize: databasePoolSize
    databaseMaxOverflow: databaseMaxOverflow
    maximumInstanceCount: maximumInstanceCount
    noticesRunner: noticesRunner
    noticesContact: noticesContact
    apiDocsEnabled: apiDocsEnabled
  }
}

// What the hook and the operator need; names and addresses only, never a key.
output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = app.outputs.name
output AZURE_FUNCTION_APP_URL string = app.outputs.url
output AZURE_KEY_VAULT_NAME string = vault.outputs.name
output AZURE_SQL_SERVER_NAME string = database.outputs.serverName
output AZURE_SQL_SERVER_FQDN string = database.outputs.fullyQualifiedDomainName
output AZURE_SQL_DATABASE string = database.outputs.databaseName
// Not AZURE_CLIENT_ID: azd hands outputs to the hooks as variables, and that name would point
// the deployer's own DefaultAzureCredential at the app's identity.
output APP_IDENTITY_NAME string = identity.outputs.name
output APP_IDENTITY_CLIENT_ID string = identity.outputs.clientId
output APP_IDENTITY_PRINCIPAL_ID string = identity.outputs.principalId
output MAXIMUM_INSTANCE_COUNT int = maximumInstanceCount
