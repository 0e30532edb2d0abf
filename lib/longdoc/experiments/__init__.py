"""What the notebooks call: building runs for each system, result records, the artefact cache."""
