"""Plain-text report of the communication ledger (:mod:`placement.verification.ledger`)."""

from __future__ import annotations


from placement.report.table import cell, format_table
from placement.verification.ledger import Ledger, format_bytes


def format_ledger(ledger: Ledger) -> str:
    """The ledger as text: the bandwidth, a table per device, the links, and the verdict."""
    rho = ledger.time_per_byte
    lines = ["communication ledger (bytes crossing device boundaries)"]
    if rho.value is None:
        lines.append("time per byte: unknown (no edge carries a tensor size above 0)")
    else:
        lines.append(f"time per byte: {rho.value:.10g}, shared by {rho.supporting} of {rho.sized} sized tensors "
                     f"({cell(1 / rho.value) if rho.value > 0 else 'inf'} bytes per time unit)")
    header = ("device", "type", "activations in", "activations out", "errors in", "errors out", "charged",
              "ledger time", "check")
    rows = [header]
    for d in ledger.devices:
        rows.append((str(d.position), d.type, format_bytes(d.activations_in), format_bytes(d.activations_out),
                     format_bytes(d.errors_in), format_bytes(d.errors_out), cell(d.charged), cell(d.ledger_time), d.status))
    lines.extend(format_table(rows, left={1, 8}))
    if ledger.links:
        lines.append("links (bytes):")
        for link in ledger.links:
            parts = []
            if link.activations:
                parts.append(f"activations {format_bytes(link.activations)}")
            if link.errors:
                parts.append(f"errors {format_bytes(link.errors)}")
            lines.append(f"  {link.source} -> {link.target}: {', '.join(parts) or '0'}")
    lines.append(ledger.summary)
    if rho.value is not None:
        lines.extend(f"  {p}" for p in ledger.disagreements)
    return "\n".join(lines)
