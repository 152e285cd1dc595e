#pragma once
// The banner over the shard table and the tensor table: the resume verdict (core's
// resume_verdict, from the bytes and the values together) and what it means for resuming, with
// an icon and a tinted background, so the verdict never depends on colour alone. For a world-size
// change of intact shards it offers the cure: Reshard to the job's world size; for a folder that holds
// no checkpoint, the one next to it.

#include "core/checkpoint/verify.h"
#include "core/report/verdict.h"

#include <QFrame>

class QLabel;
class QPushButton;

namespace shardwidgets {

class FailureBanner : public QFrame {
    Q_OBJECT
public:
    // Unchecked: the bytes pass but the values are not read (yet): neither good nor bad.
    // NoCheckpoint: the folder holds nothing ShardScope opens: neither good nor bad either.
    enum class State { Hidden, Verifying, Good, Bad, Cancelled, Unchecked, NoCheckpoint };

    explicit FailureBanner(QWidget* parent = nullptr);

    void showVerifying(const QString& directory);
    // The verdict of a verification alone (the values not read): what the bytes say.
    void showReport(const shardscope::VerifyReport& report);
    // `readingValues`: the values are being read, so an unchecked verdict is still in progress.
    void showVerdict(const shardscope::ResumeVerdict& verdict, bool readingValues = false);
    void showError(const QString& title, const QString& detail);
    // Any other verdict (the Tensors page's content health, for one).
    void showResult(bool good, const QString& title, const QString& meaning)
    {
        apply(good ? State::Good : State::Bad, title, meaning);
    }
    void hideBanner();
    // Under a NoCheckpoint verdict: a button that opens the checkpoint next to the folder
    // (openRequested). Cleared by the next verdict.
    void suggestCheckpoint(const QString& path, const QString& text);
    QString suggestedPath() const { return m_suggested; } // empty: none offered

    State state() const { return m_state; }
    int reshardOffered() const { return m_reshardTo; } // 0: no Reshard button shown
    QString title() const;
    QString text() const; // title and meaning together

signals:
    void reshardRequested(int worldSize);
    void openRequested(const QString& path);

private:
    void apply(State state, const QString& title, const QString& meaning);

    State m_state = State::Hidden;
    QLabel* m_icon;
    QLabel* m_title;
    QLabel* m_meaning;
    QPushButton* m_reshard;
    int m_reshardTo = 0;
    QPushButton* m_open; // the suggested checkpoint
    QString m_suggested;
};

} // namespace shardwidgets
