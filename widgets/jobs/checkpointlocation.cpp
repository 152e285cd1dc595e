#include "widgets/jobs/checkpointlocation.h"

#include <QDir>

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

shardscope::storage::Location checkpointLocation(const QString& text)
{
    if (isUrl(text)) {
        shardscope::storage::Location where = shardscope::storage::parse_location(text.toStdString());
        where.verify_tls = g_tlsVerified;
        return where;
    }
    return shardscope::storage::Location(std::filesystem::path(QDir::cleanPath(text).toStdString()));
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
