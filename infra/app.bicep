// The Function App on Flex Consumption (FC1), Python 3.11, deployed from a blob container, with
// the one user-assigned identity for everything it reaches: the host's storage, the notices'
// container, Key Vault references, the database (an Entra token) and Application Insights.
// Its app settings are the project's settings model (docs/settings.md); a test reads this file
// and fails when the two disagree (tests/integration/checkout/test_infra_app_settings.py).
param name string
param planName string
param location string
param tags object
param identityId string
param identityClientId string
param appSubnetId string
param hostBlobEndpoint string
param deploymentContainerUrl string
param noticesBlobEndpoint string
param noticesContainerName string
param applicationInsightsConnectionString string
param vaultUri string
param sqlServerFqdn string
param databaseName string
param hostId string
param databasePoolSize int
param databaseMaxOverflow int
// Derived in main.bicep from the pool and the database tier (docs/deploy.md): the most instances
// whose connections the database's workers can take. Flex Consumption's floor is 40.
@minValue(40)
@maxValue(1000)
param maximumInstanceCount int
@allowed([
  'None'
  'Api'
  'Function'
])
param noticesRunner string = 'None'
param noticesContact string
param apiDocsEnabled bool

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  // checkov:skip=CKV_AZURE_225: Flex Consumption offers zone redundancy in some regions only; set zoneRedundant here in one that does
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
  }
}

resource functionApp 'Microsoft.Web/sites@2024-04-01' = {
  // checkov:skip=CKV_AZURE_212: Flex Consumption scales from zero on demand up to maximumInstanceCount; an always-ready instance costs at idle
  // checkov:skip=CKV_AZURE_213: Flex Consumption does not offer the App Service health check; GET /api/health/ready is the readiness probe (azurebank smoke, docs/operations.md)
  // checkov:skip=CKV_AZURE_13: the API authenticates each caller itself (a bearer token on every operation but health, readiness and the API document; docs/security.md), and the Functions host asks a function key besides: App Service Authentication would sit in front of both
  // checkov:skip=CKV_AZURE_17: client certificates are not how the API's callers authenticate (bearer tokens over TLS 1.2)
  // checkov:skip=CKV_AZURE_222: the API is public by design; what it serves is behind its bearer tokens and function keys
  name: name
  location: location
  tags: union(tags, { 'azd-service-name': 'api' })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    clientCertEnabled: false
    publicNetworkAccess: 'Enabled'
    virtualNetworkSubnetId: appSubnetId
    keyVaultReferenceIdentity: identityId
    siteConfig: {
      minTlsVersion: '1.2'
      scmMinTlsVersion: '1.2'
      ftpsState: 'Disabled'
      http20Enabled: true
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: deploymentContainerUrl
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: 2048
        triggers: {
          http: {
            // One request at a time per instance, Python's default made explicit: the
            // instance count is then what multiplies the pool (docs/deploy.md).
            perInstanceConcurrency: 1
          }
        }
      }
      runtime: {
        name: 'python'
        version: '3.11'
      }
    }
  }
}

resource appSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  // checkov:skip=CKV_AZURE_13: the resource is the site's app settings (sites/config 'appsettings'), which checkov reads as the web configuration; the API authenticates its callers itself (bearer tokens, function keys; see the site)
  // checkov:skip=CKV_AZURE_63: the resource is the site's app settings (sites/config 'appsettings'), which checkov reads as the web configuration; Flex Consumption keeps no file-system HTTP logs: requests are traced to Application Insights
  // checkov:skip=CKV_AZURE_65: the resource is the site's app settings (sites/config 'appsettings'), which checkov reads as the web configuration; detailed error pages would show callers more than the problem body the API answers with
  // checkov:skip=CKV_AZURE_66: the resource is the site's app settings (sites/config 'appsettings'), which checkov reads as the web configuration; failed requests are traced to Application Insights, Flex Consumption keeps no tracing files
  // checkov:skip=CKV_AZURE_80: the resource is the site's app settings (sites/config 'appsettings'), which checkov reads as the web configuration; the app runs on Python 3.11, no .NET Framework
  // checkov:skip=CKV_AZURE_88: the resource is the site's app settings (sites/config 'appsettings'), which checkov reads as the web configuration; the app mounts no file share: its storage is blob containers reached by identity
  // checkov:skip=CKV_AZURE_222: the resource is the site's app settings (sites/config 'appsettings'), which checkov reads as the web configuration; the API is public by design (see the site)
  parent: functionApp
  name: 'appsettings'
  properties: {
    // The Functions host's storage, by identity only.
    AzureWebJobsStorage__credential: 'managedidentity'
    AzureWebJobsStorage__clientId: identityClientId
    AzureWebJobsStorage__blobServiceUri: hostBlobEndpoint
    // Two apps on one storage account whose host ids collide would share the timer's lease.
    AzureFunctionsWebHost__hostid: hostId
    // DefaultAzureCredential's user-assigned identity: the database token and the notices' blobs.
    AZURE_CLIENT_ID: identityClientId
    APPLICATIONINSIGHTS_CONNECTION_STRING: applicationInsightsConnectionString
    APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
    // No password: the engine signs in with the identity's Entra token; Encrypt=yes and no
    // TrustServerCertificate, so the server's certificate is verified.
    Database__Url: 'mssql+pyodbc://@${sqlServerFqdn}:1433/${databaseName}?driver=ODBC+Driver+18+for+SQL+Server&Encrypt=yes'
    Database__PoolSize: string(databasePoolSize)
    Database__MaxOverflow: string(databaseMaxOverflow)
    Auth__SigningKey: '@Microsoft.KeyVault(SecretUri=${vaultUri}secrets/auth-signing-key/)'
    Audit__ChainKey: '@Microsoft.KeyVault(SecretUri=${vaultUri}secrets/audit-chain-key/)'
    // Nobody delivers until an operator names a runner (docs/operations.md).
    Notices__Runner: noticesRunner
    Notices__PickupContainer: noticesContainerName
    NoticesStorage__blobServiceUri: noticesBlobEndpoint
    Notices__Contact: noticesContact
    ApiDocs__Enabled: apiDocsEnabled ? 'true' : 'false'
  }
}

output name string = functionApp.name
output url string = 'https://${functionApp.properties.defaultHostName}'
