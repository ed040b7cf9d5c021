"""PyFlink's pyflink.datastream.connectors.kafka; the implementations live in runtime.api.connectors."""
from runtime.api.connectors.kafka_sink import (
    DeliveryGuarantee,
    KafkaRecordSerializationSchema,
    KafkaRecordSerializationSchemaBuilder,
    KafkaSink,
    KafkaSinkBuilder,
)
from runtime.api.connectors.kafka_source import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaSource,
    KafkaSourceBuilder,
    KafkaTopicPartition,
)

__all__ = [
    "DeliveryGuarantee", "KafkaOffsetResetStrategy", "KafkaOffsetsInitializer", "KafkaRecordSerializationSchema",
    "KafkaRecordSerializationSchemaBuilder", "KafkaSink", "KafkaSinkBuilder", "KafkaSource", "KafkaSourceBuilder", "KafkaTopicPartition",
]
