"""What the notebooks call: the study protocol (the kernel: study, systems, settings, fitting, cache,
records, verdicts, report, paper numbers), the families of systems (``families/``: retrieval,
matching, generative, and the pre-training they share) and the papers' rows and claims (``papers/``)."""
