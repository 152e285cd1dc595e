#pragma once
// What an S3 server answers, read from the body alone: a page of a listing (ListObjectsV2,
// ListMultipartUploads) and the sentence an error answer becomes. Apart from the client so that
// the fuzz targets feed them hostile bodies without a server. Each throws Error(remote_error)
// naming `what` (the request) for a body it refuses.

#include "core/storage/s3.h"

#include <string>
#include <string_view>
#include <vector>

namespace shardscope::storage {

struct ListingPage {
    std::vector<ObjectInfo> objects; // in the server's order
    std::vector<std::string> prefixes; // with a delimiter: the CommonPrefixes ("run/step-1/")
    bool truncated = false;
    std::string next_token; // not empty when truncated
};

// Every object and common prefix must lie beneath `prefix` with a plain name (no "", "." or ".."
// component; a common prefix ends in "/"). A page that is not is an Error(remote_error) whose message
// begins with `what` (the request) and whose path is `object` (the prefix listed).
ListingPage read_listing_page(std::string_view body, std::string_view prefix, const std::string& what,
                              const std::string& object);

struct UploadsPage {
    std::vector<MultipartUpload> uploads; // those beneath `prefix`
    bool truncated = false;
    std::string next_key_marker, next_upload_id_marker;
};

UploadsPage read_uploads_page(std::string_view body, std::string_view prefix, const std::string& what,
                              const std::string& object);

// "HTTP 503 SlowDown (Please reduce your request rate.)": the status and the error's code and
// message, printable and bounded.
std::string server_said(long status, const std::string& body);

} // namespace shardscope::storage
