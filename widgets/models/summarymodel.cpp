#include "widgets/models/summarymodel.h"

#include "widgets/style/format.h"

#include "core/util/printable.h"

#include <QStringList>

namespace shardwidgets {

namespace {

QString jsonScalar(const nlohmann::json& value)
{
    if (value.is_string())
        return printableText(value.get_ref<const std::string&>());
    // dump() escapes control characters; `replace` keeps a string that is not UTF-8 from throwing.
    return printableText(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// A value whose later lines are its details (the tooltip's): each line made printable on its
// own, so its line breaks stay line breaks.
QString printableLines(const std::string& text)
{
    QStringList lines;
    std::size_t start = 0;
    for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
        lines << printableText(std::string_view(text).substr(start, end - start));
    lines << printableText(std::string_view(text).substr(start));
    return lines.join(QLatin1Char('\n'));
}

// Training state is free-form JSON: show nested objects as dotted paths, one leaf per row, but
// keep long arrays (RNG state) on one row, shortened, with the whole value in the tooltip.
void flatten(const nlohmann::json& node, const QString& prefix, std::vector<std::pair<QString, nlohmann::json>>& out,
             int depth = 0)
{
    if (node.is_object() && depth < 4) {
        for (auto it = node.begin(); it != node.end(); ++it) {
            const QString key = printableText(it.key());
            flatten(it.value(), prefix.isEmpty() ? key : prefix + QLatin1Char('.') + key, out, depth + 1);
        }
        return;
    }
    out.emplace_back(prefix, node);
}

} // namespace

SummaryModel::SummaryModel(QObject* parent) : QAbstractTableModel(parent) {}

void SummaryModel::setCheckpoint(const QString& dir, const QString& format, const shardscope::Manifest& manifest)
{
    beginResetModel();
    m_entries.clear();
    auto add = [this](const QString& property, const QString& value, const QString& tip = {}) {
        m_entries.push_back({property, value, tip.isEmpty() ? value : tip});
    };
    add(tr("Directory"), printableText(dir));
    add(tr("Format"), format);
    add(tr("Schema version"), QString::number(manifest.schema_version));
    add(tr("World size"), QString::number(manifest.world_size));
    add(tr("Step"), formatCount(manifest.step));
    add(tr("Wall clock"), formatDuration(manifest.wall_clock_seconds),
        tr("%1 seconds").arg(manifest.wall_clock_seconds));
    add(tr("Total bytes"), formatBytes(manifest.total_bytes()), tr("%1 bytes").arg(manifest.total_bytes()));
    add(tr("Parameter dtype"), QString::fromUtf8(shardscope::to_string(manifest.param_dtype)));
    add(tr("Parameters"), formatCount(manifest.param_numel_total));
    add(tr("Model tensors"), manifest.tensors.empty() ? tr("not listed") : QString::number(manifest.tensors.size()));
    if (!manifest.training_state.is_null()) {
        std::vector<std::pair<QString, nlohmann::json>> leaves;
        flatten(manifest.training_state, {}, leaves);
        for (const auto& [key, value] : leaves) {
            const QString full = jsonScalar(value);
            QString shown = full;
            if (shown.size() > 60)
                shown = shown.left(57) + QStringLiteral("…");
            add(tr("Training state: %1").arg(key), shown, full);
        }
    } else {
        add(tr("Training state"), tr("not recorded"));
    }
    endResetModel();
}

void SummaryModel::setForeign(const QString& dir, const shardscope::VerifyReport& report)
{
    beginResetModel();
    m_entries.clear();
    auto add = [this](const QString& property, const QString& value) {
        QString shown = value.section(QLatin1Char('\n'), 0, 0); // further lines are for the tooltip
        if (shown.size() > 80)
            shown = shown.left(77) + QStringLiteral("…");
        m_entries.push_back({property, shown, value});
    };
    add(tr("Directory"), printableText(dir));
    add(tr("Format"), printableText(report.format));
    if (report.foreign) {
        for (const auto& [key, value] : report.foreign->rows)
            if (key != "format")
                add(printableText(key), printableLines(value));
        // The first few as a preview: the checkpoint page's Tensor list tab lists them all (200 here
        // cost 60 ms of the GUI thread for a DCP checkpoint's chunk lines).
        constexpr std::size_t kShownTensors = 16;
        for (std::size_t i = 0; i < report.foreign->tensors.size() && i < kShownTensors; ++i) {
            const auto& t = report.foreign->tensors[i];
            QStringList dims;
            for (const auto d : t.shape)
                dims << QString::number(d);
            const QString where = t.chunks.size() > 1 ? tr(" in %1 chunks").arg(t.chunks.size())
                : t.file.empty()                      ? QString()
                                                      : QStringLiteral(" in %1").arg(printableText(t.file));
            QString value =
                QStringLiteral("%1 [%2] %3%4")
                    .arg(printableText(t.dtype), dims.join(QStringLiteral(", ")), formatBytes(t.bytes), where);
            // Chunked tensors (DCP) list where each chunk lives, below the line the table shows.
            constexpr std::size_t kShownChunks = 16;
            if (t.chunks.size() > 1) {
                for (std::size_t c = 0; c < t.chunks.size() && c < kShownChunks; ++c) {
                    const auto& chunk = t.chunks[c];
                    value += tr("\nat %1 size %2: %3")
                                 .arg(QString::fromStdString(shardscope::join_dims(chunk.offsets)),
                                      QString::fromStdString(shardscope::join_dims(chunk.sizes)),
                                      chunk.file.empty() ? tr("no storage")
                                                         : tr("%1 bytes [%2, +%3)")
                                                               .arg(printableText(chunk.file))
                                                               .arg(chunk.offset)
                                                               .arg(chunk.length));
                }
                if (t.chunks.size() > kShownChunks)
                    value += tr("\n… %1 more chunks").arg(t.chunks.size() - kShownChunks);
            }
            add(tr("Tensor %1").arg(printableText(t.name)), value);
        }
        if (report.foreign->tensors_total > kShownTensors)
            add(tr("More tensors"), QString::number(report.foreign->tensors_total - kShownTensors));
    }
    endResetModel();
}

void SummaryModel::clear()
{
    beginResetModel();
    m_entries.clear();
    endResetModel();
}

QString SummaryModel::value(const QString& property) const
{
    for (const Entry& entry : m_entries)
        if (entry.property == property)
            return entry.value;
    return {};
}

int SummaryModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_entries.size());
}

int SummaryModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant SummaryModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const Entry& entry = m_entries[std::size_t(index.row())];
    switch (role) {
    case Qt::DisplayRole: return index.column() == Property ? entry.property : entry.value;
    case Qt::ToolTipRole: return index.column() == Property ? entry.property : entry.tooltip;
    }
    return {};
}

QVariant SummaryModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    return section == Property ? tr("Property") : tr("Value");
}

} // namespace shardwidgets
