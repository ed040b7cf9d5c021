"""Checkpoint coordination on the JobMaster (Flink: CheckpointCoordinator, CompletedCheckpointStore)."""
