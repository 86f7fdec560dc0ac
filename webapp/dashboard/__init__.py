"""The staff learning dashboard: live version, queue depths, samples waiting, and charts."""
