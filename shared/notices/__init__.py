"""The notice relay's shared protocol (docs/decisions.md#adr-0048, docs/operations.md): every
runner (the timer Function, the API's loop, the verb) calls it; loggers: `azurebank.notices.*`."""
