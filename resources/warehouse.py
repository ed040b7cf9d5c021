"""DeltaWarehouseResource: where Millrace's Delta tables live, and (later) checkpoints and savepoints.

One base location; tables are `<base>/<name>`, checkpoints `<base>/_checkpoints/<job>` and
savepoints `<base>/_savepoints/<job>` unless configured elsewhere. Relative locations are resolved
against the working directory of the process that asks (the Dagster code location and its runs
start in the project folder), and returned absolute so Millrace's TaskManagers, which may run in
another directory, write to the same place.
"""
import os
import re
from typing import Any

from dagster import ConfigurableResource
from pydantic import Field

from runtime.core.errors import ConfigurationError
from runtime.storage import delta_read

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*(/[A-Za-z0-9_][A-Za-z0-9_.\-]*)*$")


def _absolute(location: str) -> str:
    if "://" in location:
        return location.rstrip("/")
    return os.path.abspath(os.path.expanduser(location))


class DeltaWarehouseResource(ConfigurableResource):
    """Locations of Delta tables, checkpoints and savepoints, plus reads of table versions."""

    base_path: str = Field(
        default="warehouse", description="base location of the tables: a local folder or a URI (s3://, abfss://, gs://)"
    )
    checkpoints_path: str | None = Field(
        default=None, description="where jobs' checkpoints go (default: <base_path>/_checkpoints)"
    )
    savepoints_path: str | None = Field(
        default=None, description="where savepoints go (default: <base_path>/_savepoints)"
    )
    storage_options: dict[str, str] = Field(
        default={}, description="delta-rs storage options for object stores (credentials, endpoint, region)"
    )

    @staticmethod
    def _check_name(kind: str, name: str) -> str:
        if not _NAME.match(name or "") or ".." in name.split("/"):
            raise ConfigurationError(
                f"{kind} name {name!r} is not a valid location name: use letters, digits, '_', '-', '.' (and '/' for sub-folders)"
            )
        return name

    def base(self) -> str:
        return _absolute(self.base_path)

    def table_path(self, name: str) -> str:
        """Location of the Delta table `name` (absolute)."""
        return f"{self.base()}/{self._check_name('table', name)}"

    def checkpoint_path(self, job: str) -> str:
        """Location of the checkpoints of job `job` (absolute)."""
        root = _absolute(self.checkpoints_path) if self.checkpoints_path else f"{self.base()}/_checkpoints"
        return f"{root}/{self._check_name('job', job)}"

    def savepoint_path(self, job: str) -> str:
        """Location of the savepoints of job `job` (absolute)."""
        root = _absolute(self.savepoints_path) if self.savepoints_path else f"{self.base()}/_savepoints"
        return f"{root}/{self._check_name('job', job)}"

    def resolve(self, path_or_name: str) -> str:
        """A table given by name (no '/' and no '.' prefix) or by path; returned absolute."""
        if "://" in path_or_name or os.path.isabs(path_or_name) or path_or_name.startswith(".") or os.sep in path_or_name:
            return _absolute(path_or_name)
        return self.table_path(path_or_name)

    def options(self) -> dict[str, str] | None:
        return dict(self.storage_options) or None

    def table_version(self, path: str) -> int | None:
        """The newest version of the table at `path` (None if there is none yet)."""
        return delta_read.table_version(path, self.options())

    def snapshot(self, path: str, version: int | None = None) -> delta_read.DeltaSnapshot:
        return delta_read.snapshot(path, version, self.options())

    def read_table(self, path: str, version: int | None = None, columns: list[str] | None = None) -> Any:
        """The table as a pyarrow Table."""
        return delta_read.read_table(path, version, columns, self.options())

    def replace_rows(self, path: str, data: Any, where: dict[str, Any], partition_by: list[str] | None = None) -> int:
        """Replace the rows matching `where` (column -> value) with `data`, in one commit; the new version."""
        from runtime.storage.delta_write import replace_rows

        return replace_rows(path, data, where, partition_by, self.options())

    def delete_rows(self, path: str, where: dict[str, Any]) -> int:
        """Delete the rows matching `where` in one commit; how many went."""
        from runtime.storage.delta_write import delete_rows

        return delete_rows(path, where, self.options())
