#include "widgets/models/steplistmodel.h"

#include "widgets/jobs/checkpointlocation.h"

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
    std::stable_sort(steps.begin(), steps.end(),
                     [](const auto& a, const auto& b) { return a.step != b.step ? a.step > b.step : a.tier < b.tier; });
    m_steps = std::move(steps);
    m_root = cleanCheckpointText(root);
    m_mirror = mirror.isEmpty() ? QString() : cleanCheckpointText(mirror);
    endResetModel();
}

void StepListModel::clear()
{
    beginResetModel();
    m_steps.clear();
    m_root.clear();
    m_mirror.clear();
    m_current.clear();
    m_lock.reset();
    m_uploads.clear();
    m_mirrorRead = true;
    endResetModel();
}

void StepListModel::setRootState(std::optional<shardscope::LockHolder> lock,
                                 std::map<std::string, shardscope::UploadState> uploads, bool mirrorRead)
{
    m_lock = std::move(lock);
    m_uploads = std::move(uploads);
    m_mirrorRead = mirrorRead;
    if (!m_steps.empty())
        emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
}

std::optional<shardscope::UploadState> StepListModel::uploadState(int row) const
{
    if (row < 0 || row >= rowCount() || m_mirror.isEmpty())
        return std::nullopt;
    const auto& s = m_steps[std::size_t(row)];
    if (s.tier != shardscope::StepTier::local)
        return std::nullopt;
    const auto it = m_uploads.find(s.name);
    return it == m_uploads.end() ? std::nullopt : std::optional(it->second);
}

void StepListModel::setCurrentDirectory(const QString& directory)
{
    m_current = cleanCheckpointText(directory);
    if (!m_steps.empty())
        emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1), {Qt::FontRole});
}

QString StepListModel::directory(int row) const
{
    if (row < 0 || row >= rowCount())
        return {};
    const auto& s = m_steps[std::size_t(row)];
    const QString base = s.tier == shardscope::StepTier::mirror ? m_mirror : m_root;
    return childOf(base, QString::fromStdString(s.name));
}

int StepListModel::rowForDirectory(const QString& directory) const
{
    const QString wanted = comparableCheckpointText(directory);
    for (int row = 0; row < rowCount(); ++row)
        if (comparableCheckpointText(this->directory(row)) == wanted)
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
    m_verdicts[comparableCheckpointText(directory)] = ok; // however the path was spelled
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
        lines << (!m_mirrorRead    ? tr("whether the mirror holds a copy is not known: it could not be read")
                      : s.uploaded ? tr("the mirror holds a verified copy")
                                   : tr("not (yet) uploaded to the mirror"));
    if (s.tier == shardscope::StepTier::local && m_mirror.isEmpty() && !isUrl(m_root))
        lines << tr("upload state: choose the mirror (Mirror…) to see it");
    return lines.join(QLatin1Char('\n'));
}

namespace {

QString uploadText(shardscope::UploadState state)
{
    switch (state) {
    case shardscope::UploadState::pending: return StepListModel::tr("pending");
    case shardscope::UploadState::uploading: return StepListModel::tr("uploading");
    case shardscope::UploadState::uploaded: return StepListModel::tr("uploaded");
    case shardscope::UploadState::failed: return StepListModel::tr("failed");
    }
    return {};
}

Severity uploadSeverity(shardscope::UploadState state)
{
    switch (state) {
    case shardscope::UploadState::pending: return Severity::neutral;
    case shardscope::UploadState::uploading: return Severity::busy;
    case shardscope::UploadState::uploaded: return Severity::good;
    case shardscope::UploadState::failed: return Severity::bad;
    }
    return Severity::neutral;
}

} // namespace

QVariant StepListModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& s = m_steps[std::size_t(index.row())];
    // Complete means loadable: a manifest and no debris of an interrupted write beside it.
    const bool complete = s.complete && s.leftover_tmp_files.empty();
    const bool mirror = s.tier == shardscope::StepTier::mirror;
    const auto verdict = m_verdicts.find(comparableCheckpointText(directory(index.row())));
    const bool failed = verdict != m_verdicts.end() && !verdict->second;
    const bool verified = verdict != m_verdicts.end() && verdict->second;
    const std::optional<shardscope::UploadState> upload = uploadState(index.row());
    // A mirror copy the running job is writing now: incomplete on purpose, not a failure.
    const auto copy = mirror && !s.complete ? m_uploads.find(s.name) : m_uploads.end();
    const bool copying = copy != m_uploads.end() && copy->second == shardscope::UploadState::uploading;
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case Step: return QString::number(s.step);
        case WallClock: return s.complete ? formatDuration(s.wall_clock_seconds) : QStringLiteral("–");
        case Status:
            if (failed)
                return tr("failed verification");
            if (copying)
                return tr("uploading");
            return !complete ? tr("incomplete") : verified ? tr("verified") : tr("complete");
        case Latest: return s.is_latest ? tr("latest") : QString();
        case Tier:
            if (isUrl(m_root))
                return tr("bucket"); // a root in a bucket: its steps are its own, not a mirror's
            if (mirror)
                return tr("mirror");
            return s.uploaded ? tr("local + mirror") : tr("local");
        case Upload:
            // "–": a mirror row, no mirror chosen, or older than the steps the mirror is to hold.
            if (!mirror && !m_mirror.isEmpty() && !m_mirrorRead)
                return tr("unknown");
            return upload ? uploadText(*upload) : QStringLiteral("–");
        }
        break;
    case Qt::DecorationRole:
        if (index.column() == Status)
            return severityIcon(copying ? Severity::busy : complete && !failed ? Severity::good : Severity::bad);
        if (index.column() == Upload && upload) // a word and an icon: never colour alone
            return severityIcon(uploadSeverity(*upload));
        break;
    case Qt::ToolTipRole:
        if (index.column() == Upload && !mirror) {
            if (isUrl(m_root))
                return tr("A root in a bucket is where steps are uploaded to, not from");
            if (m_mirror.isEmpty())
                return tr("Choose the mirror (Mirror…) to see where each upload stands");
            if (!m_mirrorRead)
                return tr("Not known: the mirror could not be read (the line above the steps says why)");
            if (!upload)
                return tr("Older than the steps the mirror is meant to hold: not uploaded again");
            switch (*upload) {
            case shardscope::UploadState::uploaded: return tr("The mirror holds a verified copy (upload.json)");
            case shardscope::UploadState::uploading: return tr("The running job is copying it to the mirror");
            case shardscope::UploadState::pending: return tr("The running job has not copied it to the mirror yet");
            case shardscope::UploadState::failed:
                return tr("The mirror has no verified copy and no job is writing this root: its upload failed");
            }
        }
        return tooltip(s);
    case Qt::FontRole:
        if (comparableCheckpointText(directory(index.row())) == comparableCheckpointText(m_current)) {
            QFont bold;
            bold.setBold(true);
            return bold;
        }
        break;
    case Qt::TextAlignmentRole:
        if (index.column() == Step || index.column() == WallClock)
            return QVariant(Qt::AlignRight | Qt::AlignVCenter);
        break;
    case DirectoryRole: return directory(index.row());
    case CompleteRole: return complete && !failed;
    case UploadStateRole:
        if (upload) {
            const std::string_view word = shardscope::to_string(*upload);
            return QString::fromUtf8(word.data(), qsizetype(word.size()));
        }
        return QString();
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
    case Upload: return tr("Upload");
    }
    return {};
}

} // namespace shardwidgets
