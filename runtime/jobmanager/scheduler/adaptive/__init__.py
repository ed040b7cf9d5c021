"""The adaptive scheduler (Flink: AdaptiveScheduler): a streaming job's parallelism follows its slots."""
