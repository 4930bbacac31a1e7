"""The operator's command line, `azurebank` (docs/cli.md)."""
