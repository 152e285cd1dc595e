#pragma once
// The main window's File › Open Location…, driven as a user would: the dialog answered with `url`,
// then waiting until the bytes are verified and the values read. Shared by the window's tests.

#include "app/shardscope/mainwindow.h"
#include "widgets/panels/checkpointpanel.h"
#include "widgets/panels/tensorspanel.h"

#include <QAction>
#include <QApplication>
#include <QInputDialog>
#include <QSignalSpy>
#include <QTest>
#include <QTimer>

namespace windowtest {

// False when the dialog did not ask, or the reading did not end within a minute.
inline bool openLocation(MainWindow& window, const QString& url)
{
    QSignalSpy verified(window.checkpointPanel(), &shardwidgets::CheckpointPanel::verificationFinished);
    bool asked = false; // a QVERIFY in the timer could not fail the test: returned instead
    QTimer::singleShot(100, [&] {
        if (auto* dialog = qobject_cast<QInputDialog*>(QApplication::activeModalWidget())) {
            asked = true;
            dialog->setTextValue(url);
            dialog->accept();
        }
    });
    QAction* action = window.findChild<QAction*>(QStringLiteral("openLocationAction"));
    if (!action)
        return false;
    action->trigger();
    return asked && (verified.count() || verified.wait(60000)) &&
        QTest::qWaitFor([&] { return !window.tensorsPanel()->isReading() && window.tensorsPanel()->report(); }, 60000);
}

} // namespace windowtest
