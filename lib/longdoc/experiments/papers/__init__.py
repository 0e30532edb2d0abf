"""One module per paper: its rows, claims, protocols and settings (and the baselines they share)."""
