#include "widgets/jobs/checkpointlocation.h"

#include "core/util/error.h"
#include "widgets/style/format.h"

#include <QDir>
#include <QFileInfo>

namespace shardwidgets {

namespace {
bool g_tlsVerified = true; // set once by main() before any window exists
} // namespace

bool tlsVerified()
{
    return g_tlsVerified;
}

void setTlsVerified(bool verified)
{
    g_tlsVerified = verified;
}

bool isUrl(const QString& text)
{
    return shardscope::storage::is_url(text.toStdString());
}

QString cleanCheckpointText(const QString& text)
{
    return isUrl(text) ? text : QDir::cleanPath(text);
}

QString childOf(const QString& base, const QString& name)
{
    if (!isUrl(base))
        return QDir::cleanPath(QDir(base).filePath(name));
    try {
        return QString::fromStdString(
            to_string(shardscope::storage::parse_location(base.toStdString()).child(name.toStdString())));
    } catch (const shardscope::Error&) {
        return {}; // not a URL the app reads: nothing beneath it to open
    }
}

QString comparableCheckpointText(const QString& text)
{
    if (!isUrl(text))
        return QFileInfo(text).absoluteFilePath();
    try {
        return QString::fromStdString(to_string(shardscope::storage::parse_location(text.toStdString())));
    } catch (const shardscope::Error&) {
        return text;
    }
}

shardscope::storage::Location checkpointLocation(const QString& text)
{
    if (isUrl(text)) {
        shardscope::storage::Location where = shardscope::storage::parse_location(text.toStdString());
        where.verify_tls = g_tlsVerified;
        return where;
    }
    return shardscope::storage::Location(std::filesystem::path(QDir::cleanPath(text).toStdString()));
}

QString urlProblem(const QString& text, const QString& folderAdvice)
{
    // A mistyped URL's own sentence advises "./" before a local folder's name, which a field
    // for URLs does not take.
    if (!isUrl(text) || !text.contains(QLatin1String("://")))
        return QObject::tr("%1: not a URL (s3://bucket/prefix, http(s)://host/path)").arg(printableText(text)) +
            (folderAdvice.isEmpty() ? QString() : QStringLiteral("; ") + folderAdvice);
    try {
        (void)checkpointLocation(text);
    } catch (const shardscope::Error& e) {
        return printableText(QString::fromStdString(e.what()));
    }
    return {};
}

std::optional<QString> localOnly(const QString& text, const QString& what)
{
    if (!isUrl(text))
        return std::nullopt;
    return QObject::tr(
               "%1 reads and writes local folders; %2 is read in place only (verify, tensors, compare, convert)")
        .arg(what, text);
}

} // namespace shardwidgets
