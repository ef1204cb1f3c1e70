"""The stores layer: model stores (local trees, fsspec URLs) found by content (discover.py), audited (static.py,
audit.py) and converted whole (batch.py), on an executor (executors/: local warm pools or Ray) through one verify
path (verify_store.py) and one result cache (cache.py); auditreport/ renders the audit and store reports."""
