"""tinyacp's benchmarks: ``python -m benchmarks.run`` (see ``benchmarks/RESULTS.md``); not part of the package."""
