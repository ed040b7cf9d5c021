"""JobManager high availability (Flink's HighAvailabilityServices): leader election and retrieval
through ZooKeeper, the HA stores in Delta (runtime.storage.ha_stores), and the fence every commit
of a leader passes. `none` (the embedded default) elects the only JobManager at once."""
