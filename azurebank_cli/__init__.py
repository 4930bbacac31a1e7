"""The operator's command line, `azurebank` (DESIGN §8)."""
