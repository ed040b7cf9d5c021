"""Dagster resources (ConfigurableResources with documented pydantic fields): Spark, the Millrace
cluster client, and the Delta warehouse locations."""
from resources.millrace import MillraceClusterResource, MillraceRun, SubmittedJob
from resources.spark import SparkResource
from resources.warehouse import DeltaWarehouseResource

__all__ = ["DeltaWarehouseResource", "MillraceClusterResource", "MillraceRun", "SparkResource", "SubmittedJob"]
