// Azure SQL with Entra authentication only: no SQL login exists, the deployer is the server's
// Entra admin (it runs the migrations and `azurebank db grant`), and the app signs in as its
// managed identity with a token. The firewall admits the app's subnet (a virtual network rule),
// not all of Azure; infra/hooks/postprovision.sh opens the deployer's own address for the
// length of its run and closes it again.
param serverName string
param databaseName string
param location string
param tags object
param deployerPrincipalId string
param deployerName string
@allowed([
  'User'
  'ServicePrincipal'
])
param deployerPrincipalType string
param skuName string
param appSubnetId string
param logAnalyticsId string

resource sqlServer 'Microsoft.Sql/servers@2023-08-01-preview' = {
  // checkov:skip=CKV_AZURE_113: public network access stays on so the firewall can admit the app's subnet (a service endpoint) and, for one hook run, the deployer's address; no other address and not all of Azure
  name: serverName
  location: location
  tags: tags
  properties: {
    minimalTlsVersion: '1.2'
    publicNetworkAccess: 'Enabled'
    administrators: {
      administratorType: 'ActiveDirectory'
      azureADOnlyAuthentication: true
      login: deployerName
      sid: deployerPrincipalId
      tenantId: subscription().tenantId
      principalType: deployerPrincipalType == 'User' ? 'User' : 'Application'
    }
  }
}

resource appSubnetRule 'Microsoft.Sql/servers/virtualNetworkRules@2023-08-01-preview' = {
  parent: sqlServer
  name: 'app-subnet'
  properties: {
    virtualNetworkSubnetId: appSubnetId
  }
}

// The server's audit policy and threat detection, for every database on it.
resource serverAudit 'Microsoft.Sql/servers/auditingSettings@2023-08-01-preview' = {
  parent: sqlServer
  name: 'default'
  properties: {
    state: 'Enabled'
    isAzureMonitorTargetEnabled: true
    retentionDays: 91
  }
}

resource serverAlerts 'Microsoft.Sql/servers/securityAlertPolicies@2023-08-01-preview' = {
  parent: sqlServer
  name: 'Default'
  properties: {
    state: 'Enabled'
    emailAccountAdmins: true
    disabledAlerts: []
  }
}

resource appDatabase 'Microsoft.Sql/servers/databases@2023-08-01-preview' = {
  // checkov:skip=CKV_AZURE_27: emailAccountAdmins is set on databaseAlerts; this check reads only policies nested inside the database, which Bicep declares as child resources
  // checkov:skip=CKV_AZURE_26: no address is known at provisioning; the alerts go to the subscription's admins (emailAccountAdmins)
  // checkov:skip=CKV_AZURE_229: one zone at idle cost; the backups are zone-redundant (requestedBackupStorageRedundancy Zone) and zone redundancy is a change of this setting
  parent: sqlServer
  name: databaseName
  location: location
  tags: tags
  sku: {
    name: skuName
    tier: 'GeneralPurpose'
  }
  properties: {
    // Serverless: paused after an idle hour. The first logins while it resumes are refused with
    // error 40613, which the app treats as the database being unavailable and retries.
    autoPauseDelay: 60
    minCapacity: json('0.5')
    zoneRedundant: false
    requestedBackupStorageRedundancy: 'Zone'
  }
}

// The app's database audits itself to the workspace (auditToLogs), every login and statement.
resource databaseAudit 'Microsoft.Sql/servers/databases/auditingSettings@2023-08-01-preview' = {
  parent: appDatabase
  name: 'default'
  properties: {
    state: 'Enabled'
    isAzureMonitorTargetEnabled: true
    retentionDays: 91
  }
}

resource databaseAlerts 'Microsoft.Sql/servers/databases/securityAlertPolicies@2023-08-01-preview' = {
  parent: appDatabase
  name: 'Default'
  properties: {
    state: 'Enabled'
    emailAccountAdmins: true
    disabledAlerts: []
  }
}

resource auditToLogs 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'audit-to-logs'
  scope: appDatabase
  properties: {
    workspaceId: logAnalyticsId
    logs: [
      {
        category: 'SQLSecurityAuditEvents'
        enabled: true
      }
    ]
  }
}

output serverName string = sqlServer.name
output fullyQualifiedDomainName string = sqlServer.properties.fullyQualifiedDomainName
output databaseName string = appDatabase.name
