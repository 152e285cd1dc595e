#include "widgets/models/steplistmodel.h"

#include "widgets/style/format.h"
#include "widgets/style/statusstyle.h"

#include <QDir>
#include <QFileInfo>
#include <QFont>
#include <algorithm>

namespace shardwidgets {

StepListModel::StepListModel(QObject* parent) : QAbstractTableModel(parent) {}

void StepListModel::setSteps(std::vector<shardscope::StepInfo> steps, const QString& root, const QString& mirror)
{
    beginResetModel();
    // Newest first: the step a person resumes from is nearly always near the top. Within a step
    // the local copy comes before the mirror's.
    std::stable_sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) {
        return a.step != b.step ? a.step > b.step : a.tier < b.tier;
    });
    m_steps = std::move(steps);
    m_root = QDir::cleanPath(root);
    m_mirror = mirror.isEmpty() ? QString() : QDir::cleanPath(mirror);
    endResetModel();
}

void StepListModel::clear()
{
    beginResetModel();
    m_steps.clear();
    m_root.clear();
    m_mirror.clear();
    m_current.clear();
    endResetModel();
}

void StepListModel::setCurrentDirectory(const QString& directory)
{
    m_current = QDir::cleanPath(directory);
    if (!m_steps.empty())
        emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1), {Qt::FontRole});
}

QString StepListModel::directory(int row) const
{
    if (row < 0 || row >= rowCount())
        return {};
    const auto& s = m_steps[std::size_t(row)];
    const QString base = s.tier == shardscope::StepTier::mirror ? m_mirror : m_root;
    return QDir(base).filePath(QString::fromStdString(s.name));
}

int StepListModel::rowForDirectory(const QString& directory) const
{
    const QString clean = QDir::cleanPath(directory);
    for (int row = 0; row < rowCount(); ++row)
        if (this->directory(row) == clean)
            return row;
    return -1;
}

int StepListModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_steps.size());
}

int StepListModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

void StepListModel::setVerdict(const QString& directory, bool ok)
{
    m_verdicts[QFileInfo(directory).absoluteFilePath()] = ok; // however the path was spelled
    if (!m_steps.empty())
        emit dataChanged(index(0, Status), index(rowCount() - 1, Status));
}

QString StepListModel::tooltip(const shardscope::StepInfo& s) const
{
    QStringList lines;
    lines << printableText(s.name);
    if (s.complete)
        lines << tr("%n rank(s), %1", nullptr, s.world_size).arg(formatBytes(s.bytes));
    if (!s.problem.empty())
        lines << printableText(s.problem);
    for (const auto& file : s.leftover_tmp_files)
        lines << tr("leftover temporary file %1 (an interrupted write)").arg(printableText(file));
    if (s.is_latest)
        lines << tr("`latest` names this step: a resume starts here");
    if (s.tier == shardscope::StepTier::local && !m_mirror.isEmpty())
        lines << (s.uploaded ? tr("the mirror holds a verified copy") : tr("not (yet) uploaded to the mirror"));
    return lines.join(QLatin1Char('\n'));
}

QVariant StepListModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& s = m_steps[std::size_t(index.row())];
    // Complete means loadable: a manifest and no debris of an interrupted write beside it.
    const bool complete = s.complete && s.leftover_tmp_files.empty();
    const bool mirror = s.tier == shardscope::StepTier::mirror;
    const auto verdict = m_verdicts.find(QFileInfo(directory(index.row())).absoluteFilePath());
    const bool failed = verdict != m_verdicts.end() && !verdict->second;
    const bool verified = verdict != m_verdicts.end() && verdict->second;
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case Step: return QString::number(s.step);
        case WallClock: return s.complete ? formatDuration(s.wall_clock_seconds) : QStringLiteral("–");
        case Status:
            if (failed)
                return tr("failed verification");
            return !complete ? tr("incomplete") : verified ? tr("verified") : tr("complete");
        case Latest: return s.is_latest ? tr("latest") : QString();
        case Tier:
            if (mirror)
                return tr("mirror");
            return s.uploaded ? tr("local + mirror") : tr("local");
        }
        break;
    case Qt::DecorationRole:
        if (index.column() == Status)
            return severityIcon(complete && !failed ? Severity::good : Severity::bad);
        break;
    case Qt::ToolTipRole:
        return tooltip(s);
    case Qt::FontRole:
        if (directory(index.row()) == m_current) {
            QFont bold;
            bold.setBold(true);
            return bold;
        }
        break;
    case Qt::TextAlignmentRole:
        if (index.column() == Step || index.column() == WallClock)
            return QVariant(Qt::AlignRight | Qt::AlignVCenter);
        break;
    case DirectoryRole:
        return directory(index.row());
    case CompleteRole:
        return complete && !failed;
    }
    return {};
}

QVariant StepListModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case Step: return tr("Step");
    case WallClock: return tr("Wall clock");
    case Status: return tr("Status");
    case Latest: return tr("Latest");
    case Tier: return tr("Tier");
    }
    return {};
}

} // namespace shardwidgets
