#include "widgets/jobs/checkpointlocation.h"

#include <QDir>

namespace shardwidgets {

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
    if (isUrl(text))
        return shardscope::storage::parse_location(text.toStdString());
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
