// Logs and Application Insights with local (key) authentication off: the app's identity
// publishes with an Entra token (APPLICATIONINSIGHTS_AUTHENTICATION_STRING), holding only the
// Monitoring Metrics Publisher role on this one component.
param logAnalyticsName string
param applicationInsightsName string
param location string
param tags object
param appPrincipalId string

var monitoringMetricsPublisher = '3913510d-42f4-4e42-8a64-420c390055eb'

resource logs 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: 30
  }
}

resource insights 'Microsoft.Insights/components@2020-02-02' = {
  name: applicationInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: logs.id
    DisableLocalAuth: true
  }
}

resource appPublishesTelemetry 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(insights.id, appPrincipalId, monitoringMetricsPublisher)
  scope: insights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisher)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

output logAnalyticsId string = logs.id
output applicationInsightsName string = insights.name
// An identifier of the component, not a credential: with local authentication off, ingestion
// needs the app identity's Entra token besides it.
output connectionString string = insights.properties.ConnectionString
