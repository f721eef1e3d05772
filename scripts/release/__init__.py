"""Release tooling: the one-command GPU check, the offline wheelhouse and the Docker check."""
