"""JWTs made with Python's hmac, to check the data plane's verification against: good ones,
and bad ones of every kind a test asks for (bad signature, alg none, other alg labels)."""
import base64
import hashlib
import hmac
import json


def b64(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def token(key, claims, alg="HS256", flip=False):
    """header.claims.signature; the signature is always HMAC-SHA256 whatever the alg label says
    (alg none: no signature); flip spoils its first byte."""
    head = b64(json.dumps({"alg": alg, "typ": "JWT"}).encode()) + "." + b64(json.dumps(claims).encode())
    if alg == "none":
        return head + "."
    sig = hmac.new(key, head.encode(), hashlib.sha256).digest()
    if flip:
        sig = bytes([sig[0] ^ 1]) + sig[1:]
    return head + "." + b64(sig)

