"""The command, the report, the economy simulator, the docs, packaging, types, scripts, benchmarks."""
