"""PyFlink's pyflink.common.serialization: Encoder (what a row-format FileSink writes per record)."""
from __future__ import annotations

from typing import Any


class Encoder:
    """`Encoder.simple_string_encoder()` writes str(record) and a newline (Flink's SimpleStringEncoder)."""

    def __init__(self, charset: str = "utf-8") -> None:
        self.charset = charset

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> Encoder:
        return Encoder(charset_name.lower())

    def encode(self, value: Any) -> bytes:
        return (str(value) + "\n").encode(self.charset)
