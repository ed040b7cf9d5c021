"""PyFlink's pyflink.datastream.connectors.kafka; the implementations live in runtime.api.connectors."""
from runtime.api.connectors.kafka_sink import (
    DeliveryGuarantee,
    KafkaRecordSerializationSchema,
    KafkaRecordSerializationSchemaBuilder,
    KafkaSink,
    KafkaSinkBuilder,
)

__all__ = ["DeliveryGuarantee", "KafkaRecordSerializationSchema", "KafkaRecordSerializationSchemaBuilder", "KafkaSink", "KafkaSinkBuilder"]
