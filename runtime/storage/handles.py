"""What storage writes and hands up: handles of the files a task wrote (state files of a checkpoint,
files of a blocking result), carried to the JobMaster in the RPC messages that acknowledge them."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class FileHandle(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BlockingResultFile(FileHandle):
    """One file of a blocking result partition (path relative to the result's table root)."""

    path: str
    size: int
    rows: int
    row_groups: dict[int, list[int]] = Field(default_factory=dict)  # subpartition -> its row groups, in order


class StateFileHandle(FileHandle):
    """A state file a task wrote for a checkpoint (path relative to the checkpoint table root)."""

    path: str
    size: int
    rows: int
    operator_ids: list[str]  # operator id of every operator with rows in the file
