"""Compression of the blobs relayflow stores in DynamoDB items (run headers, pages and
checkpoint groups): zlib with a preset dictionary, since an item is billed per KB written.
"""

from __future__ import annotations

import zlib

#: zlib's preset dictionary for header documents, pages and checkpoint groups: the keys and
#: values nearly every item repeats, so a small item compresses to little more than what is
#: its own. Never change it (stored items were compressed with it); zlib names the
#: dictionary a blob needs, so a new one would be tried by that id. Blobs written without a
#: dictionary read back as well.
_DICTIONARY = (
    b'{"input":{},"output":null,"error":{"name":"","message":"","stack":null,"retryable":false},'
    b'"timeoutMs":null,"timeoutDeadline":null,"parent":{"runId":"","waitpointId":"invoke:"},'
    b'"completedAt":17,"triggeredBy":{"kind":"api"},"idempotencyKey":"","runNumber":1,'
    b'"tenantMeta":{"tenantId":"default","projectId":"default","organizationId":"default"},'
    b'"cancelRequest":{},"dispatchRetry":{"failures":0,"nextAttemptAt":null,"lastError":null},'
    b'"reconcileAt":null,"dirty":true,["meta","",{}],["strk","",{}],["inbx","",{"id":"evt_",'
    b'"kind":"EVENT","key":"","payload":null,"receivedAt":17}],["chld","",{}],'
    b'["wres","sleep:0",{"kind":"DATETIME","resolvedAt":17,"payload":null,"source":"replay",'
    b'"matchedEventId":null,"error":null,"timedOut":null}],'
    b'["wreg","sleep:0",{"kind":"DATETIME","registeredAt":17,"wakeAt":17,"deadline":null,'
    b'"heartbeatDeadline":null,"name":null}],'
    b'["step","s0",{"status":"ok","output":{},"error":null,"attempt":1,"startedAt":17,'
    b'"finishedAt":17,"runtime":"edge","kind":"step","nextAttemptAt":null,"attempts":[{'
    b'"attempt":1,"status":"ok","startedAt":17,"finishedAt":17,"error":null,"invocation":null,'
    b'"logged":null}],"metadataUpdates":[],"compensables":[],"name":null}],'
    b'{"input":{},"journal":{},"invocationCount":1,"operationsCount":2,"computeTimeMs":10,'
    b'"pendingWaitpoints":[{"clientWaitpointId":"sleep:0","kind":"DATETIME","meta":{'
    b'"durationMs":60000},"timeoutMs":60000}],"lease":{"owner":"drv_","expiresAt":17},'
    b'"wakeAt":17,"alarmArmed":true,"alarmAt":17,"checkpointSeq":1,"checkpointOpen":true}'
)


def pack(data: bytes) -> bytes:
    """``data`` compressed for an item (zlib with the preset dictionary)."""
    compressor = zlib.compressobj(9, zdict=_DICTIONARY)
    return compressor.compress(data) + compressor.flush()


def unpack(blob: bytes) -> bytes:
    """What :func:`pack` compressed (or plain zlib, as stored before the dictionary)."""
    decompressor = zlib.decompressobj(zdict=_DICTIONARY)
    return decompressor.decompress(bytes(blob)) + decompressor.flush()
