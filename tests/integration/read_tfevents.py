#!/usr/bin/python3
"""read_tfevents.py FILE — an independent reader of TensorBoard event files
for the tests: checks each record's framing and both masked CRC32Cs
(python3-crc32c), decodes every Event with a descriptor built here from
TensorBoard's field numbers (python3-protobuf, not hetps's schema), and
prints one line per event: "file_version V", or "step S TAG=VALUE ...".
Exits 1 naming the first bad record."""
import struct
import sys

import crc32c
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def build():
    fd = descriptor_pb2.FileDescriptorProto(name="tb_event_reader.proto",
                                            package="tbr", syntax="proto3")
    summary = fd.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL)
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE,
                      label=F.LABEL_REPEATED, type_name=".tbr.Summary.Value")
    ev = fd.message_type.add(name="Event")
    ev.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    ev.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    ev.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    ev.field.add(name="summary", number=5, type=F.TYPE_MESSAGE,
                 label=F.LABEL_OPTIONAL, type_name=".tbr.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.MessageFactory(pool).GetPrototype(
        pool.FindMessageTypeByName("tbr.Event"))


def masked(b):
    c = crc32c.crc32c(b)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def main(path):
    Event = build()
    data = open(path, "rb").read()
    at, n = 0, 0
    while at < len(data):
        if len(data) - at < 12:
            sys.exit(f"{path}: record {n}: truncated header at byte {at}")
        head = data[at:at + 8]
        (length,) = struct.unpack("<Q", head)
        (hcrc,) = struct.unpack("<I", data[at + 8:at + 12])
        if hcrc != masked(head):
            sys.exit(f"{path}: record {n}: length CRC {hcrc:#x} != {masked(head):#x}")
        body = data[at + 12:at + 12 + length]
        if len(body) != length or at + 16 + length > len(data):
            sys.exit(f"{path}: record {n}: truncated data")
        (dcrc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if dcrc != masked(body):
            sys.exit(f"{path}: record {n}: data CRC {dcrc:#x} != {masked(body):#x}")
        e = Event()
        e.ParseFromString(body)
        if e.wall_time < 1e9:
            sys.exit(f"{path}: record {n}: wall_time {e.wall_time} is not a Unix time")
        if n == 0:
            if e.file_version != "brain.Event:2":
                sys.exit(f"{path}: the first event is not file_version brain.Event:2")
            print("file_version", e.file_version)
        else:
            if not e.HasField("summary"):
                sys.exit(f"{path}: record {n}: no summary")
            print("step", e.step, " ".join(f"{v.tag}={v.simple_value:.6g}"
                                           for v in e.summary.value))
        at += 16 + length
        n += 1


main(sys.argv[1])
