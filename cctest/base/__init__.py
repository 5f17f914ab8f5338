"""The ground: errors and their exit codes, safe reading and writing of files, locks, strict models
and limits. Imports nothing else of cctest."""
