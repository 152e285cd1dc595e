#pragma once
// The one place the app turns the text of a checkpoint it opens into a location: a local path
// (cleaned, as before) or an s3:// or http(s):// URL kept as typed. QDir::cleanPath would turn
// "s3://ckpt/run" into the relative folder "s3:/ckpt/run": a URL is never cleaned as a path.

#include "core/storage/location.h"

#include <QString>
#include <optional>

namespace shardwidgets {

bool isUrl(const QString& text);

// The text as the app keeps it: a URL unchanged, a path through QDir::cleanPath.
QString cleanCheckpointText(const QString& text);

// `name` (a step directory) beneath `base`, a folder or a URL: "s3://ckpt/run" + "step-1" is
// "s3://ckpt/run/step-1" (core's Location::child), never QDir's "s3:/ckpt/run/step-1".
QString childOf(const QString& base, const QString& name);

// One spelling of a checkpoint for comparing two of them: a URL as core spells it (no trailing
// '/'), a path absolute and cleaned.
QString comparableCheckpointText(const QString& text);

// Throws shardscope::Error(invalid_argument) for a URL that cannot be read (an unknown scheme,
// credentials in it), naming it without the credentials. An https:// server's certificate is
// checked unless the app was started with --no-verify-tls.
shardscope::storage::Location checkpointLocation(const QString& text);

// For a field that takes a URL only (File › Open Location…, a mirror location): empty when the
// app can read `text`, else the sentence that says why not, naming it: a folder or a mistyped
// URL ("s3:/ckpt/run") is "not a URL", followed by `folderAdvice` (where a folder is chosen
// instead); an unknown scheme or a bad bucket name as checkpointLocation says it.
QString urlProblem(const QString& text, const QString& folderAdvice = {});

// Whether TLS certificates are checked: on, unless the app's command line turned it off for this
// run (--no-verify-tls, as shardctl's). Never read from or written to the settings, so a run
// without the flag always checks.
bool tlsVerified();
void setTlsVerified(bool verified);

// For the work that reads and writes local files only (reshard, a layer profile): the
// sentence that refuses a URL there, naming `what`; nullopt for a local path.
std::optional<QString> localOnly(const QString& text, const QString& what);

} // namespace shardwidgets
