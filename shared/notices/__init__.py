"""The notice relay's shared protocol (docs/decisions.md#adr-0048, docs/operations.md), one
concept per module. Every runner (the timer Function, the API's loop, the verb) calls exactly
this code; loggers are named `azurebank.notices.*`."""
