// widgets/panels/stepspane: the steps of a root, read off the GUI thread. A listing that fails
// keeps the rows shown and says why; a listing waiting on a server that does not answer (here a
// socket that takes connections and never answers, standing for a stalled S3 endpoint) is
// cancelled when another root is shown and when the pane goes, instead of holding the app for
// the requests' stall timeout times their retries.

#include "widgets/panels/stepspane.h"
#include "widgets/models/steplistmodel.h"
#include "widgettestutil.h"

#include <QDir>
#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using shardwidgets::StepsPane;

namespace {

// A listening socket nobody accepts from: the kernel completes the connections, no answer comes.
struct SilentServer {
    int fd = -1;
    int port = 0;
    SilentServer()
    {
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t size = sizeof address;
        if (::bind(fd, reinterpret_cast<sockaddr*>(&address), size) == 0 && ::listen(fd, 64) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0)
            port = ntohs(address.sin_port);
    }
    ~SilentServer() { ::close(fd); }
};

} // namespace

class TestStepsPane : public QObject {
    Q_OBJECT

    SilentServer m_silent;

private slots:
    void initTestCase()
    {
        QVERIFY(m_silent.port > 0);
        qputenv("AWS_ENDPOINT_URL", QByteArray("http://127.0.0.1:") + QByteArray::number(m_silent.port));
        qputenv("AWS_ACCESS_KEY_ID", "AKIDTESTSTEPSPANE");
        qputenv("AWS_SECRET_ACCESS_KEY", "stepspane-test-secret");
        qputenv("AWS_DEFAULT_REGION", "us-east-1");
    }

    void aFailedListingKeepsTheRowsAndSaysWhy()
    {
        QTemporaryDir tmp;
        const QString root = tmp.filePath(QStringLiteral("run"));
        widgettest::makeCheckpoint(QDir(root).filePath(QStringLiteral("step-00000010")), 2, 1000, 10);
        widgettest::makeCheckpoint(QDir(root).filePath(QStringLiteral("step-00000020")), 2, 1000, 20);
        StepsPane pane;
        pane.setAutoRefreshInterval(0);
        QSignalSpy listed(&pane, &StepsPane::listed);
        pane.setSteps({}, root);
        QVERIFY(listed.wait(10000));
        QCOMPARE(pane.model()->rowCount(), 2);
        QVERIFY(pane.readingProblem().isEmpty());

        QVERIFY(QDir().rename(root, tmp.filePath(QStringLiteral("moved"))));
        pane.refresh();
        QVERIFY(listed.wait(10000));
        QCOMPARE(pane.model()->rowCount(), 2);
        QVERIFY2(pane.readingProblem().startsWith(QStringLiteral("Could not list the steps again")) &&
                     pane.readingProblem().contains(root),
                 qPrintable(pane.readingProblem()));
    }

    void anotherRootIsListedWithoutWaitingForAStalledOne()
    {
        QTemporaryDir tmp;
        const QString root = tmp.filePath(QStringLiteral("run"));
        widgettest::makeCheckpoint(QDir(root).filePath(QStringLiteral("step-00000010")), 2, 1000, 10);
        StepsPane pane;
        pane.setAutoRefreshInterval(0);
        QSignalSpy listed(&pane, &StepsPane::listed);
        pane.setSteps({}, QStringLiteral("s3://stalled/run"));
        QVERIFY(pane.isListing());
        QTest::qWait(300); // the request is out, waiting
        QElapsedTimer clock;
        clock.start();
        pane.setSteps({}, root);
        QVERIFY(listed.wait(10000));
        QVERIFY2(clock.elapsed() < 5000, qPrintable(QString::number(clock.elapsed())));
        QCOMPARE(pane.model()->root(), root);
        QCOMPARE(pane.model()->rowCount(), 1);
        QCOMPARE(listed.count(), 1); // the stalled root's reading was dropped, not shown
    }

    void aStalledListingStopsWhenThePaneGoes()
    {
        auto* pane = new StepsPane;
        pane->setAutoRefreshInterval(0);
        pane->setSteps({}, QStringLiteral("s3://stalled/run"));
        QVERIFY(pane->isListing());
        QCOMPARE(pane->model()->rowCount(), 0);
        QTest::qWait(300);
        QElapsedTimer clock;
        clock.start();
        delete pane; // waits for its listing, which the cancel stops
        QVERIFY2(clock.elapsed() < 5000, qPrintable(QString::number(clock.elapsed())));
    }
};

QTEST_MAIN(TestStepsPane)
#include "tst_stepspane.moc"
