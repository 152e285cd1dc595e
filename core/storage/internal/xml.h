#pragma once
// The little XML that S3 answers with (listings, upload ids, errors), read without an XML
// library: elements found by name, their text with the five predefined entities and character
// references decoded. A document type declaration is refused, so an entity-expansion bomb has
// nothing to expand; the caller bounds the document's size.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::storage {

// False for a document with a DOCTYPE or ENTITY declaration.
bool xml_acceptable(std::string_view document);

// The contents of every <tag>...</tag> (attributes allowed on the opening tag), in order.
std::vector<std::string_view> xml_elements(std::string_view document, std::string_view tag);

// The decoded text of the first <tag> in `document`, or nullopt without one (or with a
// malformed character reference).
std::optional<std::string> xml_text(std::string_view document, std::string_view tag);

} // namespace shardscope::storage
