"""One Kafka broker for every Kafka test of this package (a broker start is ~5 s of the suite)."""
from tests.kafka_support import kafka_broker_fixture

kafka = kafka_broker_fixture(scope="package")
