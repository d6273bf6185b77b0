"""Checks a run directory's TensorBoard event files against its metrics.jsonl, reading them
without any of ustrain's code: the TFRecord framing is parsed here and both CRC-32Cs of every
record are checked with crcmod; the Events are decoded by the protobuf library with message
classes built below from TensorBoard's published field numbers, not from ustrain's .proto.

Usage: check_tfevents.py RUN_DIR

Passes (exit 0) when every file is named events.out.tfevents.<unix time>.<host>[.N], opens
with the file_version event "brain.Event:2", every record's CRCs are right, every event
decodes with nothing left over, and, after TensorBoard's restart rule (a SessionLog START at
step S drops what earlier files recorded for steps >= S), the scalars are exactly metrics.jsonl's
numbers rounded to float32, with the same steps and wall times. Otherwise prints each
discrepancy and exits 1.
"""
import json
import math
import os
import re
import struct
import sys

import crcmod.predefined
from google.protobuf import descriptor_pb2, message_factory

crc32c = crcmod.predefined.mkCrcFun("crc-32c")


def masked_crc(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tensorboard_messages():
    """Event, Summary and SessionLog with TensorBoard's field numbers (event.proto, summary.proto)."""
    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="check_tfevents.proto", package="check", syntax="proto3")

    def add(message, name, number, kind, type_name=None, oneof=None, repeated=False):
        f = message.field.add(name=name, number=number, type=kind,
                              label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
        if type_name:
            f.type_name = type_name
        if oneof is not None:
            f.oneof_index = oneof

    event = file.message_type.add(name="Event")
    event.oneof_decl.add(name="what")
    add(event, "wall_time", 1, F.TYPE_DOUBLE)
    add(event, "step", 2, F.TYPE_INT64)
    add(event, "file_version", 3, F.TYPE_STRING, oneof=0)
    add(event, "summary", 5, F.TYPE_MESSAGE, ".check.Summary", oneof=0)
    add(event, "session_log", 7, F.TYPE_MESSAGE, ".check.SessionLog", oneof=0)

    summary = file.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    value.oneof_decl.add(name="value")
    add(value, "tag", 1, F.TYPE_STRING)
    add(value, "simple_value", 2, F.TYPE_FLOAT, oneof=0)
    add(summary, "value", 1, F.TYPE_MESSAGE, ".check.Summary.Value", repeated=True)

    session_log = file.message_type.add(name="SessionLog")
    status = session_log.enum_type.add(name="SessionStatus")
    for name, number in [("STATUS_UNSPECIFIED", 0), ("START", 1), ("STOP", 2), ("CHECKPOINT", 3)]:
        status.value.add(name=name, number=number)
    add(session_log, "status", 1, F.TYPE_ENUM, ".check.SessionLog.SessionStatus")

    return message_factory.GetMessages([file])["check.Event"]


Event = tensorboard_messages()
START = 1
NAME = re.compile(r"events\.out\.tfevents\.\d{10}\.[^/]+(\.\d+)?")


def read_records(path, problems):
    """The payloads of a TFRecord file; a bad CRC or a torn record is a problem."""
    data = open(path, "rb").read()
    records, at = [], 0
    while at < len(data):
        if at + 12 > len(data):
            problems.append(f"{path}: torn record header at byte {at}")
            break
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (stored,) = struct.unpack("<I", data[at + 8:at + 12])
        if stored != masked_crc(header):
            problems.append(f"{path}: length CRC mismatch at byte {at}")
            break  # the length cannot be trusted, so neither can anything after it
        if at + 16 + length > len(data):
            problems.append(f"{path}: torn record at byte {at}")
            break
        payload = data[at + 12:at + 12 + length]
        (stored,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if stored != masked_crc(payload):
            problems.append(f"{path}: data CRC mismatch in the record at byte {at}")
        records.append(payload)
        at += 16 + length
    return records


def float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0] if abs(x) < 3.4e38 else math.copysign(math.inf, x)


def expected_scalars(metrics_path):
    """(tag, step) -> (value as float32, wall time) for every number of metrics.jsonl."""
    expected = {}
    with open(metrics_path) as f:
        for n, line in enumerate(f, 1):
            row = json.loads(line)
            for name, value in row.items():
                if name in ("kind", "step", "time") or value is None:
                    continue
                expected[(f"{row['kind']}/{name}", row["step"])] = (float32(value), row["time"])
    return expected


def main(run_dir):
    problems = []
    names = sorted(n for n in os.listdir(run_dir) if n.startswith("events.out.tfevents."))
    if not names:
        problems.append(f"{run_dir}: no events.out.tfevents.* file")
    seen = {}  # (tag, step) -> (value, wall time) surviving the restart rule
    events = 0
    for name in names:
        path = os.path.join(run_dir, name)
        if not NAME.fullmatch(name):
            problems.append(f"{path}: not named events.out.tfevents.<unix time>.<host>")
        records = read_records(path, problems)
        if not records:
            problems.append(f"{path}: no events, not even the file_version one")
        for i, payload in enumerate(records):
            event = Event.FromString(payload)
            events += 1
            if event.SerializeToString() != payload:
                problems.append(f"{path}: event {i} holds fields TensorBoard's Event does not declare")
            kind = event.WhichOneof("what")
            if i == 0:
                if kind != "file_version" or event.file_version != "brain.Event:2":
                    problems.append(f"{path}: the first event is not file_version brain.Event:2")
                continue
            if kind == "session_log" and event.session_log.status == START:
                seen = {key: v for key, v in seen.items() if key[1] < event.step}
            elif kind == "summary":
                for value in event.summary.value:
                    if value.WhichOneof("value") != "simple_value":
                        problems.append(f"{path}: {value.tag} at step {event.step} has no simple_value")
                    elif (value.tag, event.step) in seen:
                        problems.append(f"{path}: {value.tag} at step {event.step} recorded twice")
                    else:
                        seen[(value.tag, event.step)] = (value.simple_value, event.wall_time)
            else:
                problems.append(f"{path}: event {i} is an unexpected {kind}")

    expected = expected_scalars(os.path.join(run_dir, "metrics.jsonl"))
    if not expected:
        problems.append(f"{run_dir}/metrics.jsonl holds no numbers to compare with")
    for key in sorted(expected.keys() - seen.keys())[:10]:
        problems.append(f"{key[0]} at step {key[1]} is in metrics.jsonl but in no event")
    for key in sorted(seen.keys() - expected.keys())[:10]:
        problems.append(f"{key[0]} at step {key[1]} is in an event but not in metrics.jsonl")
    for key in sorted(expected.keys() & seen.keys()):
        (want, want_time), (got, got_time) = expected[key], seen[key]
        if got != want:
            problems.append(f"{key[0]} at step {key[1]}: event {got!r}, metrics.jsonl {want!r} as float32")
        if abs(got_time - want_time) > 1e-6:
            problems.append(f"{key[0]} at step {key[1]}: event wall time {got_time}, metrics.jsonl {want_time}")

    for p in problems[:20]:
        print("FAIL:", p)
    if problems:
        print(f"{len(problems)} problem(s) in {run_dir}'s event files")
        return 1
    print(f"ok: {len(names)} event file(s), {events} events, {len(seen)} scalars equal metrics.jsonl's")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
