"""The API server: HTTP routing and verbs, the object store, discovery, auth, validation, patches,
selectors, Table printing, faults and TLS."""
