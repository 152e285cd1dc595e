#include "widgets/views/ownershipmap.h"

#include "widgets/style/chartcolors.h"
#include "widgets/style/format.h"
#include "widgets/views/hovertext.h"
#include "widgets/views/rankgroup.h"

#include <QPainter>
#include <algorithm>
#include <cmath>

namespace shardwidgets {

OwnershipMap::OwnershipMap(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
}

void OwnershipMap::setManifest(const shardscope::Manifest& manifest)
{
    std::vector<OwnershipRange> ranks, tensors;
    m_rankFiles.clear();
    for (const auto& shard : manifest.shards) {
        ranks.push_back({shard.param_shard_offset, shard.param_shard_numel, shard.rank});
        m_rankFiles[shard.rank] = tr("%1 · %2").arg(printableText(shard.path), formatBytes(shard.bytes));
    }
    m_tensorNames.clear();
    m_tensorShapes.clear();
    for (std::size_t i = 0; i < manifest.tensors.size(); ++i) {
        tensors.push_back({manifest.tensors[i].offset, manifest.tensors[i].numel, int(i)});
        m_tensorNames.push_back(manifest.tensors[i].name);
        m_tensorShapes.push_back(manifest.tensors[i].shape);
    }
    m_reshardTotal = manifest.param_numel_total;
    setData(std::move(ranks), std::move(tensors), manifest.param_numel_total);
}

void OwnershipMap::setForeignLayout(const shardscope::ForeignLayout& layout,
                                    const std::vector<shardscope::ShardCheck>& files)
{
    std::vector<OwnershipRange> ranks, tensors; // reserved: a DCP checkpoint has a holder per chunk
    ranks.reserve(layout.holders.size());
    tensors.reserve(layout.tensors.size());
    for (const auto& h : layout.holders)
        ranks.push_back({h.offset, h.numel, h.id});
    for (const auto& t : layout.tensors)
        tensors.push_back({t.offset, t.numel, t.id});
    m_tensorNames = layout.tensor_names;
    m_tensorShapes = layout.tensor_shapes;
    m_rankFiles.clear();
    for (const auto& file : files) {
        QString& text = m_rankFiles[file.rank];
        text += (text.isEmpty() ? QString() : QStringLiteral("\n")) +
            tr("%1 · %2").arg(printableText(file.path), formatBytes(file.actual_bytes));
    }
    m_reshardTotal = 0;
    setData(std::move(ranks), std::move(tensors), layout.total);
}

void OwnershipMap::setData(std::vector<OwnershipRange> ranks, std::vector<OwnershipRange> tensors, uint64_t total)
{
    auto byOffset = [](const auto& a, const auto& b) { return a.offset < b.offset; };
    std::sort(ranks.begin(), ranks.end(), byOffset);
    std::sort(tensors.begin(), tensors.end(), byOffset);
    m_ranks = std::move(ranks);
    m_tensors = std::move(tensors);
    std::vector<int> ids;
    ids.reserve(m_ranks.size());
    m_rankCount = 0;
    for (const auto& r : m_ranks)
        if (r.id >= 0) {
            ids.push_back(r.id);
            m_rankCount = std::max(m_rankCount, r.id + 1);
        }
    std::sort(ids.begin(), ids.end());
    m_holders = int(std::unique(ids.begin(), ids.end()) - ids.begin());
    m_total = total;
    m_hasData = true;
    m_failed.clear();
    setFixedHeight(preferredHeight());
    update();
}

void OwnershipMap::clear()
{
    m_hasData = false;
    m_total = 0;
    m_reshardTotal = 0;
    m_ranks.clear();
    m_tensors.clear();
    m_holders = m_rankCount = 0;
    m_tensorNames.clear();
    m_tensorShapes.clear();
    m_rankFiles.clear();
    m_failed.clear();
    update();
}

void OwnershipMap::setFailedRanks(std::set<int> ranks)
{
    m_failed = std::move(ranks);
    update();
}

void OwnershipMap::setReshardTarget(int worldSize)
{
    m_target = std::max(0, worldSize);
    setFixedHeight(preferredHeight());
    update();
}

std::vector<OwnershipMap::Lane> OwnershipMap::lanes() const
{
    std::vector<Lane> result;
    result.push_back({tr("Ranks (%1)").arg(m_holders), m_ranks, Lane::Ranks});
    if (!m_tensors.empty())
        result.push_back({tr("Tensors (%1)").arg(m_tensors.size()), m_tensors, Lane::Tensors});
    if (m_target > 0 && m_reshardTotal > 0) {
        // Made again only when the preview changed: lanes from an earlier call may view them.
        if (m_targetRanges.size() != std::size_t(m_target) || m_targetRangesTotal != m_reshardTotal) {
            m_targetRanges.clear();
            for (int r = 0; r < m_target; ++r) {
                const uint64_t begin = shardscope::even_shard_offset(m_reshardTotal, m_target, r);
                const uint64_t end = shardscope::even_shard_offset(m_reshardTotal, m_target, r + 1);
                m_targetRanges.push_back({begin, end - begin, r});
            }
            m_targetRangesTotal = m_reshardTotal;
        }
        result.push_back({tr("At %1 ranks").arg(m_target), m_targetRanges, Lane::Target});
    }
    return result;
}

int OwnershipMap::preferredHeight() const
{
    int count = 1 + (m_tensors.empty() ? 0 : 1) + (m_target > 0 && m_reshardTotal > 0 ? 1 : 0);
    return int(laneTop(count)) + 4;
}

QSize OwnershipMap::sizeHint() const
{
    return {800, preferredHeight()};
}

QSize OwnershipMap::minimumSizeHint() const
{
    return {200, preferredHeight()};
}

int OwnershipMap::rankGroup(double width) const
{
    // The most ranks any lane shows (the map's, or the reshard preview's): one grouping for all.
    const int ranks = std::max(m_rankCount, m_reshardTotal > 0 ? m_target : 0);
    // Bands side by side with a separator each: 8 px keeps a colour readable between two lines.
    return rankGroupFor(ranks, laneGeometry(width).width, 8);
}

OwnershipGeometry OwnershipMap::laneGeometry(double width) const
{
    uint64_t total = m_total;
    for (const auto& r : m_ranks)
        total = std::max(total, r.offset + r.numel);
    // The title column fits "At 2048 ranks" or "Tensors (1234)" in the font actually used.
    double labels = kLabelWidth;
    const QFontMetricsF metrics(font());
    for (const Lane& lane : lanes())
        labels = std::max(labels, std::ceil(metrics.horizontalAdvance(lane.title)) + 14);
    return OwnershipGeometry{total, labels, std::max(1.0, width - labels - 8)};
}

void OwnershipMap::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    paintMap(painter, rect());
}

void OwnershipMap::paintMap(QPainter& painter, const QRect& rect) const
{
    const QPalette& pal = palette();
    if (!paintChartBackground(painter, rect, pal, m_hasData, tr("No manifest")))
        return;
    const OwnershipGeometry geometry = laneGeometry(rect.width());
    const QFontMetrics metrics(painter.font());
    const auto all = lanes();
    const int rankGroup = this->rankGroup(rect.width());
    for (int laneIndex = 0; laneIndex < int(all.size()); ++laneIndex) {
        const Lane& lane = all[std::size_t(laneIndex)];
        const double top = rect.top() + laneTop(laneIndex);
        painter.setPen(pal.color(QPalette::Text));
        painter.drawText(QRectF(rect.left() + 4, top, geometry.left - 10, kLaneHeight),
                         Qt::AlignVCenter | Qt::AlignLeft, lane.title);
        // Ranks too many for a colour each share one per group (rankGroupFor), drawn as one band.
        const int group = lane.kind == Lane::Tensors ? 1 : rankGroup;
        const bool marksFailed = lane.kind == Lane::Ranks && !m_failed.empty(); // no lookup a range otherwise
        double lastRight = -1;
        for (std::size_t i = 0; i < lane.ranges.size();) {
            const OwnershipRange& range = lane.ranges[i];
            const int band = range.id < 0 ? range.id : range.id / group;
            bool failed = marksFailed && m_failed.count(range.id);
            int lastRank = range.id;
            std::size_t end = i + 1;
            for (; group > 1 && end < lane.ranges.size() && lane.ranges[end].id >= 0 &&
                 lane.ranges[end].id / group == band;
                 ++end) {
                failed = failed || (marksFailed && m_failed.count(lane.ranges[end].id));
                lastRank = std::max(lastRank, lane.ranges[end].id);
            }
            const OwnershipRange& last = lane.ranges[end - 1];
            i = end;
            const double x0 = geometry.xForOffset(range.offset) + rect.left();
            const double x1 = geometry.xForOffset(last.offset + last.numel) + rect.left();
            if (x1 < lastRight + 0.5 && x1 - x0 < 1)
                continue; // sub-pixel ranges behind an already painted pixel
            lastRight = x1;
            QColor fill = categoryColor(band, pal);
            if (lane.kind == Lane::Tensors)
                fill = fill.lighter(isDark(pal) ? 100 : 115);
            else if (range.id < 0) // chunks without storage: held by nobody
                fill = pal.color(QPalette::Mid);
            const QRectF box(x0, top, std::max(1.0, x1 - x0), kLaneHeight);
            painter.fillRect(box, fill);
            if (failed) {
                painter.fillRect(box, QBrush(QColor(0xc0, 0x1c, 0x28), Qt::DiagCrossPattern));
                painter.setPen(QPen(QColor(0xc0, 0x1c, 0x28), 2));
                painter.drawRect(box.adjusted(1, 1, -1, -1));
            }
            if (box.width() > 6) { // a separator on a thinner band would be all there is of it
                painter.setPen(pal.color(QPalette::Window));
                painter.drawLine(box.topRight(), box.bottomRight());
            }
            if (box.width() <= 12)
                continue; // no label fits (one glyph and the margin): making and measuring 10^4 of them cost 30 ms a paint
            QString label = lane.kind == Lane::Tensors ? printableText(m_tensorNames[std::size_t(range.id)])
                : range.id < 0                         ? QStringLiteral("?")
                : lastRank != range.id                 ? QStringLiteral("r%1–%2").arg(range.id).arg(lastRank)
                                                       : QStringLiteral("r%1").arg(range.id);
            if (failed)
                label = QStringLiteral("✗ ") + label;
            if (metrics.horizontalAdvance(label) + 6 < box.width()) {
                painter.setPen(textOn(fill));
                painter.drawText(box, Qt::AlignCenter, label);
            }
        }
        painter.setPen(pal.color(QPalette::Mid));
        painter.setBrush(Qt::NoBrush);
        painter.drawRect(QRectF(geometry.left + rect.left(), top, geometry.width, kLaneHeight));
        if (laneIndex == 0) { // scale under the first lane: where the flat vector starts and ends
            painter.setPen(pal.color(QPalette::PlaceholderText));
            QFont small = painter.font();
            small.setPointSizeF(small.pointSizeF() * 0.85);
            painter.save();
            painter.setFont(small);
            painter.drawText(QRectF(geometry.left + rect.left(), top + kLaneHeight, geometry.width, 16),
                             Qt::AlignLeft | Qt::AlignVCenter, QStringLiteral("0"));
            painter.drawText(QRectF(geometry.left + rect.left(), top + kLaneHeight, geometry.width, 16),
                             Qt::AlignRight | Qt::AlignVCenter, tr("%1 elements").arg(formatCount(geometry.total)));
            if (rankGroup > 1)
                painter.drawText(QRectF(geometry.left + rect.left(), top + kLaneHeight, geometry.width, 16),
                                 Qt::AlignHCenter | Qt::AlignVCenter, tr("colours grouped by %1 ranks").arg(rankGroup));
            painter.restore();
        }
    }
}

QString OwnershipMap::describeAt(const QPointF& position) const
{
    if (!m_hasData)
        return {};
    const auto all = lanes();
    const OwnershipGeometry geometry = laneGeometry(width());
    for (int laneIndex = 0; laneIndex < int(all.size()); ++laneIndex) {
        const double top = laneTop(laneIndex);
        if (position.y() < top || position.y() > top + kLaneHeight)
            continue;
        const Lane& lane = all[std::size_t(laneIndex)];
        const int i = geometry.rangeAt(lane.ranges, position.x());
        if (i < 0)
            return {};
        const OwnershipRange& r = lane.ranges[std::size_t(i)];
        const QString range = QStringLiteral("[%1, %2)").arg(formatCount(r.offset), formatCount(r.offset + r.numel));
        if (lane.kind == Lane::Tensors) {
            QStringList shape;
            for (auto d : m_tensorShapes[std::size_t(r.id)])
                shape << QString::number(d);
            return tr("%1 [%2]\nelements %3")
                .arg(printableText(m_tensorNames[std::size_t(r.id)]), shape.join(QStringLiteral(" × ")), range);
        }
        if (lane.kind == Lane::Target)
            return tr("After resharding to %1 ranks, rank %2 would own\nelements %3 (%4 elements)")
                .arg(m_target)
                .arg(r.id)
                .arg(range, formatCount(r.numel));
        if (r.id < 0)
            return tr("No storage recorded\nelements %1 (%2 elements)").arg(range, formatCount(r.numel));
        QString text = tr("Rank %1\nelements %2 (%3 elements)").arg(r.id).arg(range, formatCount(r.numel));
        if (const auto it = m_rankFiles.find(r.id); it != m_rankFiles.end())
            text += QLatin1Char('\n') + it->second;
        if (m_failed.count(r.id))
            text += tr("\n✗ this rank's shard failed verification");
        return text;
    }
    return {};
}

bool OwnershipMap::event(QEvent* event)
{
    return showHoverText(this, event, [this](const QPointF& at) { return describeAt(at); }) || QWidget::event(event);
}

} // namespace shardwidgets
