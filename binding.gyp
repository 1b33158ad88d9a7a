{
  "targets": [
    {
      "target_name": "portal_splice",
      "sources": ["native/splice.cc", "native/cfb8.cc", "native/heapMode.cc"],
      "defines": ["NAPI_VERSION=8"],
      "cflags_cc": ["-Wall", "-Wextra", "-O2"]
    }
  ]
}
