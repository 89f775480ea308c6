"""Records of reports: report layers, their rows, longitudinal layers and cohorts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from yyb.evidence.record import Record, shape
from yyb.evidence.records import (
    LONGITUDINAL_COHORTS,
    LONGITUDINAL_LAYER,
    LONGITUDINAL_LAYER_V2,
    REPORT_CASES,
    REPORT_LAYER,
    REPORT_LAYER_V2,
    REPORT_LAYER_V3,
    REPORT_ROWS,
)


@shape
class ReportLayer(Record):
    """A per-experiment report layer: the report document without its attempt rows and its
    models' case rows, which are in the linked rows and cases records.
    """

    schema_version: ClassVar[str] = REPORT_LAYER

    plan: str
    grader_version: str | None
    status: Literal["complete", "incomplete"]
    report: Mapping[str, Any]
    links: Mapping[str, Any]


@shape
class ReportLayerV3(ReportLayer):
    """A per-experiment report layer as written before v4: the report document without its
    attempt rows, which are in the linked rows records (the same fields as v4's).
    """

    schema_version: ClassVar[str] = REPORT_LAYER_V3


@shape
class ReportLayerV2(ReportLayer):
    """A per-experiment report layer as written before v3: the report document and the
    evidence it read (the same fields as v4's).
    """

    schema_version: ClassVar[str] = REPORT_LAYER_V2


@shape
class ReportRows(Record):
    """Up to 1,000 consecutive attempt rows of a per-experiment report, linking the evidence they
    name.
    """

    schema_version: ClassVar[str] = REPORT_ROWS

    plan: str
    rows: tuple[Mapping[str, Any], ...]
    links: Mapping[str, Any]


@shape
class ReportCases(Record):
    """Up to 1,000 consecutive case rows of one model of a per-experiment report (each case's
    summary over its attempts, in case order)."""

    schema_version: ClassVar[str] = REPORT_CASES

    plan: str
    model: str
    cases: tuple[Mapping[str, Any], ...]
    links: Mapping[str, Any]


@shape
class LongitudinalLayer(Record):
    """The longitudinal report layer: the report without its cohorts, which are in the linked
    cohorts records.
    """

    schema_version: ClassVar[str] = LONGITUDINAL_LAYER

    report: Mapping[str, Any]
    links: Mapping[str, Any]


@shape
class LongitudinalLayerV2(Record):
    """A longitudinal report layer: cohorts under stored compatibility keys, and their
    incompatibilities.
    """

    schema_version: ClassVar[str] = LONGITUDINAL_LAYER_V2

    report: Mapping[str, Any]
    links: Mapping[str, Any]


@shape
class LongitudinalCohorts(Record):
    """Up to 1,000 consecutive cohorts of a longitudinal report, linking the evidence pooled in
    them.
    """

    schema_version: ClassVar[str] = LONGITUDINAL_COHORTS

    cohorts: tuple[Mapping[str, Any], ...]
    links: Mapping[str, Any]
