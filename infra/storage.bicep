// Two storage accounts, both reached only with Entra identities (no shared key, no anonymous
// blob, TLS 1.2) and only from the app's subnet:
// - the host's: AzureWebJobsStorage (the timer's leases) and the deployment package's container;
//   Flex Consumption asks Storage Blob Data Owner on it for the app's identity;
// - the notices': the relay's pickup container (Notices__PickupContainer), on which the app's
//   identity is Storage Blob Data Contributor, on that one container. Kept apart, so the
//   notices, which carry addresses, are not readable through the host's wider role.
param hostAccountName string
param noticesAccountName string
param deploymentContainerName string
param noticesContainerName string
param location string
param tags object
param appPrincipalId string
param appSubnetId string

var blobDataOwner = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
var blobDataContributor = 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'

resource hostStorage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  // checkov:skip=CKV_AZURE_59: public network access stays on so the firewall can admit the app's subnet through its service endpoint; defaultAction Deny admits nothing else, and no key or anonymous access exists
  // checkov:skip=CKV_AZURE_206: zone-redundant in the region; the host's blobs are leases and a package azd deploy rebuilds, the notices' are copies of rows the database keeps owed until delivered
  // checkov:skip=CKV_AZURE_43: named in main.bicep from uniqueString: a prefix and 13 lowercase letters and digits, 17 characters
  name: hostAccountName
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_ZRS'
  }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    allowCrossTenantReplication: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Deny'
      bypass: 'AzureServices'
      virtualNetworkRules: [
        {
          id: appSubnetId
          action: 'Allow'
        }
      ]
    }
  }
}

resource hostBlobs 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: hostStorage
  name: 'default'
  properties: {
    deleteRetentionPolicy: {
      enabled: true
      days: 7
    }
    containerDeleteRetentionPolicy: {
      enabled: true
      days: 7
    }
  }
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: hostBlobs
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

resource noticesStorage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  // checkov:skip=CKV_AZURE_59: public network access stays on so the firewall can admit the app's subnet through its service endpoint; defaultAction Deny admits nothing else, and no key or anonymous access exists
  // checkov:skip=CKV_AZURE_206: zone-redundant in the region; the host's blobs are leases and a package azd deploy rebuilds, the notices' are copies of rows the database keeps owed until delivered
  // checkov:skip=CKV_AZURE_43: named in main.bicep from uniqueString: a prefix and 13 lowercase letters and digits, 17 characters
  name: noticesAccountName
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_ZRS'
  }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    allowCrossTenantReplication: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Deny'
      bypass: 'AzureServices'
      virtualNetworkRules: [
        {
          id: appSubnetId
          action: 'Allow'
        }
      ]
    }
  }
}

resource noticesBlobs 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: noticesStorage
  name: 'default'
  properties: {
    deleteRetentionPolicy: {
      enabled: true
      days: 7
    }
    containerDeleteRetentionPolicy: {
      enabled: true
      days: 7
    }
  }
}

resource noticesContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: noticesBlobs
  name: noticesContainerName
  properties: {
    publicAccess: 'None'
  }
}

resource appOwnsHostBlobs 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(hostStorage.id, appPrincipalId, blobDataOwner)
  scope: hostStorage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', blobDataOwner)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource appWritesNotices 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(noticesContainer.id, appPrincipalId, blobDataContributor)
  scope: noticesContainer
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', blobDataContributor)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

output hostBlobEndpoint string = hostStorage.properties.primaryEndpoints.blob
output noticesBlobEndpoint string = noticesStorage.properties.primaryEndpoints.blob
output deploymentContainerUrl string = '${hostStorage.properties.primaryEndpoints.blob}${deploymentContainerName}'
