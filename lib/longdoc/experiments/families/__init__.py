"""The families of systems: each one's data, rows (specs), fitting, dev evaluation and outcome, written once."""
