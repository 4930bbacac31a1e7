// The app's subnet: Flex Consumption's virtual network integration, with service endpoints so
// the storage accounts and the SQL server can admit this subnet alone instead of all of Azure.
param name string
param location string
param tags object

resource appSubnetRules 'Microsoft.Network/networkSecurityGroups@2023-11-01' = {
  name: '${name}-app'
  location: location
  tags: tags
  properties: {
    // The default rules only: outbound to the service endpoints and the internet (the identity
    // endpoints), nothing inbound but the virtual network's own.
    securityRules: []
  }
}

resource vnet 'Microsoft.Network/virtualNetworks@2023-11-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    addressSpace: {
      addressPrefixes: [
        '10.40.0.0/16'
      ]
    }
    subnets: [
      {
        name: 'app'
        properties: {
          addressPrefix: '10.40.1.0/24'
          networkSecurityGroup: {
            id: appSubnetRules.id
          }
          delegations: [
            {
              name: 'flex-consumption'
              properties: {
                serviceName: 'Microsoft.App/environments'
              }
            }
          ]
          serviceEndpoints: [
            {
              service: 'Microsoft.Storage'
            }
            {
              service: 'Microsoft.Sql'
            }
          ]
        }
      }
    ]
  }
}

output appSubnetId string = '${vnet.id}/subnets/app'
